{%- extends 'base.tpl' -%}
{#- The course's formgrader pages (publish/formgrader): nbgrader's base.tpl with the course's sidebar, its styles
    and static/course.js (Chinese for what nbgrader's scripts write, each row's outcome). `page` names the
    sidebar's active entry; a page's own scripts go in `page_head`, before course.js. -#}
{%- block head -%}
<meta charset="utf-8">
<link rel="stylesheet" href="{{ course_static }}/course.css">
{%- block page_head -%}
{%- endblock -%}
<script src="{{ course_static }}/course.js"></script>
{%- endblock -%}
{%- block sidebar -%}
<li role="presentation"{% if page == 'assignments' %} class="active"{% endif %}><a href="{{ base_url }}/formgrader/manage_assignments">作业</a></li>
<li role="presentation"{% if page == 'gradebook' %} class="active"{% endif %}><a href="{{ base_url }}/formgrader/gradebook">人工评分</a></li>
<li role="presentation"{% if page == 'students' %} class="active"{% endif %}><a href="{{ base_url }}/formgrader/manage_students">学生</a></li>
{%- endblock -%}
